package retryd.peers.spring;

import retryd.peers.rule.ProcessingRule;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import org.springframework.beans.factory.annotation.Value;
import org.springframework.kafka.annotation.BackOff;
import org.springframework.kafka.annotation.DltHandler;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.annotation.RetryableTopic;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.support.KafkaHeaders;
import org.springframework.kafka.support.KafkaMessageHeaderAccessor;
import org.springframework.messaging.handler.annotation.Header;
import org.springframework.messaging.handler.annotation.Payload;
import org.springframework.stereotype.Component;

/**
 * Applies the shared processing rule and writes successes to the output topic.
 * A failed attempt throws; {@code @RetryableTopic} sends the record to the next
 * retry topic, and after {@code peer.attempts} attempts to the dead-letter topic.
 */
@Component
public class PeerListener {

	private final KafkaTemplate<byte[], byte[]> template;

	private final String outputTopic;

	private final long processingNanos;

	public PeerListener(KafkaTemplate<byte[], byte[]> template, @Value("${peer.output-topic}") String outputTopic,
			@Value("${peer.processing-ms}") long processingMs) {
		this.template = template;
		this.outputTopic = outputTopic;
		this.processingNanos = TimeUnit.MILLISECONDS.toNanos(processingMs);
	}

	@RetryableTopic(
			attempts = "${peer.attempts}",
			backOff = @BackOff(delayString = "${peer.backoff.initial-ms}",
					multiplierString = "${peer.backoff.multiplier}",
					maxDelayString = "${peer.backoff.max-ms}"),
			numPartitions = "${peer.retry-topic-partitions}")
	@KafkaListener(topics = "${peer.input-topic}", concurrency = "${peer.concurrency}")
	public void listen(@Payload(required = false) byte[] value,
			@Header(name = KafkaHeaders.RECEIVED_KEY, required = false) byte[] key,
			KafkaMessageHeaderAccessor accessor) throws Exception {
		int attempt = accessor.getNonBlockingRetryDeliveryAttempt();
		if (this.processingNanos > 0) {
			LockSupport.parkNanos(this.processingNanos);
		}
		ProcessingRule.check(key, attempt);
		// Wait for the output's ack, so the input offset is committed only after
		// the output is written (at least once, as retryd); a failed send is a
		// failed attempt.
		this.template.send(this.outputTopic, key, value).get(30, TimeUnit.SECONDS);
	}

	/** The record is in the dead-letter topic already; nothing more to do. */
	@DltHandler
	public void dlt(@Payload(required = false) byte[] value) {
	}

}
