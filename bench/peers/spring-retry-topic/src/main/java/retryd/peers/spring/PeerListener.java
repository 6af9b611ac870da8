package retryd.peers.spring;

import retryd.peers.downstream.Downstream;
import retryd.peers.rule.ProcessingRule;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.springframework.beans.factory.DisposableBean;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.kafka.annotation.BackOff;
import org.springframework.kafka.annotation.DltHandler;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.annotation.RetryableTopic;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.support.KafkaHeaders;
import org.springframework.kafka.support.KafkaMessageHeaderAccessor;
import org.springframework.stereotype.Component;

/**
 * Applies the shared processing rule, or calls the downstream when
 * {@code peer.downstream} is set, and writes successes to the output topic.
 * A failed attempt throws; {@code @RetryableTopic} sends the record to the next
 * retry topic, and after {@code peer.attempts} attempts to the dead-letter topic.
 */
@Component
public class PeerListener implements DisposableBean {

	/**
	 * Headers Spring adds on the way through its retry topics, not the record's
	 * own: {@code KafkaHeaders}' ({@code kafka_original-topic},
	 * {@code kafka_exception-message}, ...) and {@code RetryTopicHeaders}'.
	 */
	private static final List<String> SPRING_HEADER_PREFIXES = List.of(KafkaHeaders.PREFIX, "retry_topic-");

	private final KafkaTemplate<byte[], byte[]> template;

	private final String outputTopic;

	private final long processingNanos;

	/** Null for the in-process rule. */
	private final Downstream downstream;

	public PeerListener(KafkaTemplate<byte[], byte[]> template, @Value("${peer.output-topic}") String outputTopic,
			@Value("${peer.processing-ms}") long processingMs, @Value("${peer.downstream}") String downstream,
			@Value("${peer.downstream-deadline-ms}") long downstreamDeadlineMs) {
		this.template = template;
		this.outputTopic = outputTopic;
		this.processingNanos = TimeUnit.MILLISECONDS.toNanos(processingMs);
		this.downstream = downstream.isEmpty() ? null : new Downstream(downstream, downstreamDeadlineMs);
	}

	@RetryableTopic(
			attempts = "${peer.attempts}",
			backOff = @BackOff(delayString = "${peer.backoff.initial-ms}",
					multiplierString = "${peer.backoff.multiplier}",
					maxDelayString = "${peer.backoff.max-ms}"),
			numPartitions = "${peer.retry-topic-partitions}")
	@KafkaListener(topics = "${peer.input-topic}", concurrency = "${peer.concurrency}")
	public void listen(ConsumerRecord<byte[], byte[]> record, KafkaMessageHeaderAccessor accessor) throws Exception {
		int attempt = accessor.getNonBlockingRetryDeliveryAttempt();
		ProducerRecord<byte[], byte[]> out;
		if (this.downstream != null) {
			out = this.downstream.process(record, ownHeaders(record), attempt, this.outputTopic);
		}
		else {
			if (this.processingNanos > 0) {
				LockSupport.parkNanos(this.processingNanos);
			}
			ProcessingRule.check(record.key(), attempt);
			out = new ProducerRecord<>(this.outputTopic, record.key(), record.value());
		}
		// Wait for the output's ack, so the input offset is committed only after
		// the output is written (at least once, as retryd); a failed send is a
		// failed attempt.
		this.template.send(out).get(30, TimeUnit.SECONDS);
	}

	/** The record is in the dead-letter topic already; nothing more to do. */
	@DltHandler
	public void dlt(ConsumerRecord<byte[], byte[]> record) {
	}

	@Override
	public void destroy() throws InterruptedException {
		if (this.downstream != null) {
			this.downstream.close();
		}
	}

	/**
	 * The record's headers without Spring's retry bookkeeping, so the
	 * downstream sees the same record on every attempt (as retryd removes its
	 * own retryd-* headers).
	 */
	private static List<Header> ownHeaders(ConsumerRecord<byte[], byte[]> record) {
		List<Header> own = new ArrayList<>();
		for (Header header : record.headers()) {
			if (SPRING_HEADER_PREFIXES.stream().noneMatch(header.key()::startsWith)) {
				own.add(header);
			}
		}
		return own;
	}

}
