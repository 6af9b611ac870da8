package retryd.peers.downstream;

import java.util.concurrent.TimeUnit;

import com.google.protobuf.Descriptors;
import com.google.protobuf.UnsafeByteOperations;
import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.MethodDescriptor;
import io.grpc.MethodDescriptor.MethodType;
import io.grpc.StatusRuntimeException;
import io.grpc.protobuf.ProtoUtils;
import io.grpc.stub.ClientCalls;
import io.retryd.v1.KafkaRecord;
import io.retryd.v1.ProcessRequest;
import io.retryd.v1.ProcessResponse;
import io.retryd.v1.Processor;
import io.retryd.v1.RecordHeader;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;

/**
 * A {@code retryd.v1.RecordProcessor} service that a peer calls once per
 * attempt, as retryd calls it: one plaintext channel to {@code host:port}, a
 * blocking call with a deadline. An OK answer gives the record for the output
 * topic; any other status is a failed attempt ({@link CallFailed}), which the
 * peer retries or dead-letters as a failure of the in-process rule.
 *
 * <p>Thread-safe: one per application, shared by all its threads.
 */
public final class Downstream implements AutoCloseable {

	/** {@code RecordProcessor/Process}, named by the proto's own descriptor. */
	private static final MethodDescriptor<ProcessRequest, ProcessResponse> PROCESS = processMethod();

	private final ManagedChannel channel;

	private final long deadlineMs;

	public Downstream(String target, long deadlineMs) {
		this.channel = ManagedChannelBuilder.forTarget(target).usePlaintext().build();
		this.deadlineMs = deadlineMs;
	}

	/**
	 * Calls Process for attempt {@code attempt} (1-based) of {@code in}, sent
	 * with {@code headers} (the record's own, without a peer's bookkeeping), and
	 * returns what goes to {@code outputTopic}: the input's key, the answer's
	 * value (the input's when it sets none), the headers with the answer's added
	 * (or only the answer's, when it says so).
	 * @throws CallFailed for any status but OK
	 */
	public ProducerRecord<byte[], byte[]> process(ConsumerRecord<byte[], byte[]> in, Iterable<Header> headers,
			int attempt, String outputTopic) {
		KafkaRecord.Builder record = KafkaRecord.newBuilder()
			.setTopic(in.topic())
			.setPartition(in.partition())
			.setOffset(in.offset())
			.setTimestampMs(in.timestamp()); // -1 when it has none, as the proto says
		// The record's arrays are not changed after it is read, so no copy.
		if (in.key() != null) {
			record.setKey(UnsafeByteOperations.unsafeWrap(in.key()));
		}
		if (in.value() != null) {
			record.setValue(UnsafeByteOperations.unsafeWrap(in.value()));
		}
		for (Header header : headers) {
			RecordHeader.Builder copy = record.addHeadersBuilder().setKey(header.key());
			if (header.value() != null) {
				copy.setValue(UnsafeByteOperations.unsafeWrap(header.value()));
			}
		}
		ProcessRequest request = ProcessRequest.newBuilder().setRecord(record).setAttempt(attempt).build();
		ProcessResponse response;
		try {
			response = ClientCalls.blockingUnaryCall(this.channel, PROCESS,
					CallOptions.DEFAULT.withDeadlineAfter(this.deadlineMs, TimeUnit.MILLISECONDS), request);
		}
		catch (StatusRuntimeException ex) {
			throw new CallFailed(ex.getMessage()); // "CODE: description"
		}
		if (response.hasValue() && response.getNullValue()) {
			// As retryd takes it: a malformed answer, a failed attempt.
			throw new CallFailed("malformed answer: both value and null_value");
		}
		byte[] value = response.getNullValue() ? null
				: response.hasValue() ? response.getValue().toByteArray() : in.value();
		RecordHeaders out = response.getReplaceHeaders() ? new RecordHeaders() : new RecordHeaders(headers);
		for (RecordHeader header : response.getHeadersList()) {
			out.add(header.getKey(), header.hasValue() ? header.getValue().toByteArray() : null);
		}
		return new ProducerRecord<>(outputTopic, null, in.key(), value, out);
	}

	/** Stops the channel: calls in progress get a few seconds to finish. */
	@Override
	public void close() throws InterruptedException {
		this.channel.shutdown();
		if (!this.channel.awaitTermination(5, TimeUnit.SECONDS)) {
			this.channel.shutdownNow();
		}
	}

	private static MethodDescriptor<ProcessRequest, ProcessResponse> processMethod() {
		Descriptors.MethodDescriptor process = Processor.getDescriptor()
			.findServiceByName("RecordProcessor")
			.findMethodByName("Process");
		return MethodDescriptor.<ProcessRequest, ProcessResponse>newBuilder()
			.setType(MethodType.UNARY)
			.setFullMethodName(MethodDescriptor.generateFullMethodName(process.getService().getFullName(),
					process.getName()))
			.setRequestMarshaller(ProtoUtils.marshaller(ProcessRequest.getDefaultInstance()))
			.setResponseMarshaller(ProtoUtils.marshaller(ProcessResponse.getDefaultInstance()))
			.build();
	}

	/** A failed call: any status but OK. Retriable, no stack trace needed. */
	public static final class CallFailed extends RuntimeException {

		private static final long serialVersionUID = 1L;

		CallFailed(String message) {
			super(message, null, false, false);
		}

	}

}
