package retryd.peers.pc;

import retryd.peers.downstream.Downstream;
import retryd.peers.rule.ProcessingRule;

import static io.confluent.parallelconsumer.ParallelConsumerOptions.CommitMode.PERIODIC_CONSUMER_ASYNCHRONOUS;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import io.confluent.parallelconsumer.PCRetriableException;
import io.confluent.parallelconsumer.ParallelConsumerOptions;
import io.confluent.parallelconsumer.ParallelConsumerOptions.ProcessingOrder;
import io.confluent.parallelconsumer.ParallelStreamProcessor;
import io.confluent.parallelconsumer.RecordContext;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Parallel Consumer peer: {@code pollAndProduce} with up to
 * {@code peer.concurrency} records in flight, ordered per key or unordered.
 * Retries stay in memory (PC's retry delay provider); PC has no dead-letter
 * queue, so the attempt that reaches {@code peer.attempts} produces the record
 * to {@code peer.dlq-topic} instead of the output topic, which completes it.
 * Each attempt applies the in-process rule, or calls the RecordProcessor at
 * {@code peer.downstream} when that is set.
 *
 * <p>Settings are {@code --name=value} arguments; see {@link #DEFAULTS}.
 */
public final class ParallelConsumerPeer {

	private static final String[][] DEFAULTS = {
			{ "peer.bootstrap-servers", "localhost:9092" },
			{ "peer.input-topic", "peers.in" },
			{ "peer.output-topic", "peers.out" },
			{ "peer.dlq-topic", "peers.dlq" },
			{ "peer.group-id", "peer-parallel-consumer" },
			{ "peer.ordering", "KEY" }, // KEY or UNORDERED
			{ "peer.concurrency", "16" },
			{ "peer.attempts", "5" }, // attempts in all, the first one included
			{ "peer.backoff.initial-ms", "100" },
			{ "peer.backoff.multiplier", "2.0" },
			{ "peer.backoff.max-ms", "60000" },
			{ "peer.backoff.jitter", "full" }, // full (as retryd) or none
			{ "peer.processing-ms", "0" }, // each attempt of the in-process rule
			{ "peer.downstream", "" }, // host:port of a RecordProcessor; empty: the in-process rule
			{ "peer.downstream-deadline-ms", "10000" }, };

	private ParallelConsumerPeer() {
	}

	public static void main(String[] args) throws InterruptedException {
		Properties props = settings(args);
		String outputTopic = props.getProperty("peer.output-topic");
		String dlqTopic = props.getProperty("peer.dlq-topic");
		int maxAttempts = Integer.parseInt(props.getProperty("peer.attempts"));
		long processingNanos = TimeUnit.MILLISECONDS.toNanos(Long.parseLong(props.getProperty("peer.processing-ms")));
		long initialMs = Long.parseLong(props.getProperty("peer.backoff.initial-ms"));
		double multiplier = Double.parseDouble(props.getProperty("peer.backoff.multiplier"));
		long maxMs = Long.parseLong(props.getProperty("peer.backoff.max-ms"));
		boolean fullJitter = switch (props.getProperty("peer.backoff.jitter")) {
			case "full" -> true;
			case "none" -> false;
			default -> throw new IllegalArgumentException("peer.backoff.jitter: full or none");
		};
		String target = props.getProperty("peer.downstream");
		Downstream downstream = target.isEmpty() ? null
				: new Downstream(target, Long.parseLong(props.getProperty("peer.downstream-deadline-ms")));

		ParallelConsumerOptions<byte[], byte[]> options = ParallelConsumerOptions.<byte[], byte[]>builder()
				.ordering(ProcessingOrder.valueOf(props.getProperty("peer.ordering")))
				.maxConcurrency(Integer.parseInt(props.getProperty("peer.concurrency")))
				.commitMode(PERIODIC_CONSUMER_ASYNCHRONOUS)
				.consumer(new KafkaConsumer<>(consumerConfig(props)))
				.producer(new KafkaProducer<>(producerConfig(props)))
				.retryDelayProvider(context -> retryDelay(context, initialMs, multiplier, maxMs, fullJitter))
				.build();

		ParallelStreamProcessor<byte[], byte[]> processor = ParallelStreamProcessor.createEosStreamProcessor(options);
		processor.subscribe(List.of(props.getProperty("peer.input-topic")));

		processor.pollAndProduce(context -> {
			RecordContext<byte[], byte[]> record = context.getSingleRecord();
			ConsumerRecord<byte[], byte[]> in = record.getConsumerRecord();
			int attempt = record.getNumberOfFailedAttempts() + 1;
			try {
				if (downstream != null) {
					return downstream.process(in, in.headers(), attempt, outputTopic);
				}
				if (processingNanos > 0) {
					LockSupport.parkNanos(processingNanos);
				}
				ProcessingRule.check(in.key(), attempt);
			}
			catch (ProcessingRule.ProcessingFailed | Downstream.CallFailed failed) {
				if (attempt < maxAttempts) {
					throw new PCRetriableException(failed.getMessage());
				}
				RecordHeaders headers = new RecordHeaders(in.headers().toArray());
				headers.add("peer-error", failed.getMessage().getBytes(StandardCharsets.UTF_8));
				return new ProducerRecord<>(dlqTopic, null, in.key(), in.value(), headers);
			}
			return new ProducerRecord<>(outputTopic, null, in.key(), in.value(), in.headers());
		});

		CountDownLatch closed = new CountDownLatch(1);
		Runtime.getRuntime().addShutdownHook(new Thread(() -> {
			processor.closeDrainFirst();
			if (downstream != null) {
				try {
					downstream.close();
				}
				catch (InterruptedException ex) {
					Thread.currentThread().interrupt();
				}
			}
			closed.countDown();
		}, "peer-shutdown"));
		// Bounded waits: notice a processor that closed on an error.
		while (!closed.await(1, TimeUnit.SECONDS)) {
			if (processor.isClosedOrFailed()) {
				System.err.println("parallel consumer closed or failed; exiting");
				System.exit(1);
			}
		}
	}

	/** Delay after failed attempt n: min(max, initial * multiplier^(n-1)), optionally drawn from [0, that]. */
	static Duration retryDelay(RecordContext<byte[], byte[]> context, long initialMs, double multiplier, long maxMs,
			boolean fullJitter) {
		int failed = Math.max(1, context.getNumberOfFailedAttempts());
		double capMs = Math.min((double) maxMs, initialMs * Math.pow(multiplier, failed - 1));
		long delayMs = fullJitter ? (long) (ThreadLocalRandom.current().nextDouble() * capMs) : (long) capMs;
		return Duration.ofMillis(delayMs);
	}

	private static Properties consumerConfig(Properties props) {
		Properties config = new Properties();
		config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, props.getProperty("peer.bootstrap-servers"));
		config.put(ConsumerConfig.GROUP_ID_CONFIG, props.getProperty("peer.group-id"));
		config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false); // PC commits itself
		config.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
		config.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
		config.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
		return config;
	}

	private static Properties producerConfig(Properties props) {
		Properties config = new Properties();
		config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, props.getProperty("peer.bootstrap-servers"));
		config.put(ProducerConfig.ACKS_CONFIG, "all");
		config.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
		config.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
		return config;
	}

	private static Properties settings(String[] args) {
		Properties props = new Properties();
		for (String[] entry : DEFAULTS) {
			props.setProperty(entry[0], entry[1]);
		}
		for (String arg : args) {
			int eq = arg.indexOf('=');
			if (!arg.startsWith("--") || eq < 0 || !props.containsKey(arg.substring(2, eq))) {
				throw new IllegalArgumentException("unknown argument " + arg + "; expected --name=value, names: "
						+ props.stringPropertyNames());
			}
			props.setProperty(arg.substring(2, eq), arg.substring(eq + 1));
		}
		return props;
	}

}
