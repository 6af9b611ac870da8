package retryd.peers.rule;

import java.nio.charset.StandardCharsets;

/**
 * The rule every peer shares, so outcomes can be judged from outside by key:
 * {@code flaky-} keys fail on attempts 1 and 2 and succeed on attempt 3,
 * {@code perm-} keys always fail, any other key succeeds at once.
 */
public final class ProcessingRule {

	public static final int FLAKY_FAILURES = 2;

	private ProcessingRule() {
	}

	/** Throws if attempt {@code attempt} (1-based) of a record with this key (UTF-8, or null) fails. */
	public static void check(byte[] keyBytes, int attempt) {
		if (keyBytes == null) {
			return;
		}
		String key = new String(keyBytes, StandardCharsets.UTF_8);
		if (key.startsWith("perm-")) {
			throw new ProcessingFailed("poison record, attempt " + attempt);
		}
		if (key.startsWith("flaky-") && attempt <= FLAKY_FAILURES) {
			throw new ProcessingFailed("flaky record, attempt " + attempt);
		}
	}

	/** A failed attempt; retriable, no stack trace needed. */
	public static final class ProcessingFailed extends RuntimeException {

		private static final long serialVersionUID = 1L;

		ProcessingFailed(String message) {
			super(message, null, false, false);
		}

	}

}
