package retryd.peers.spring;

import org.springframework.beans.factory.annotation.Value;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.retrytopic.DestinationTopic;
import org.springframework.kafka.retrytopic.RetryTopicComponentFactory;
import org.springframework.kafka.retrytopic.RetryTopicConfigurationSupport;
import org.springframework.kafka.retrytopic.RetryTopicNamesProviderFactory;
import org.springframework.kafka.retrytopic.SuffixingRetryTopicNamesProviderFactory;
import org.springframework.kafka.retrytopic.SuffixingRetryTopicNamesProviderFactory.SuffixingRetryTopicNamesProvider;
import org.springframework.scheduling.TaskScheduler;
import org.springframework.scheduling.concurrent.ThreadPoolTaskScheduler;

/**
 * Retry topics keep Spring's default names ({@code <input>-retry-<delay>});
 * only the dead-letter topic is named by {@code peer.dlq-topic}, so every peer
 * writes its dead letters where the benchmark looks for them (the custom naming
 * strategy of the Spring Kafka reference).
 */
@Configuration
public class RetryTopicConfig extends RetryTopicConfigurationSupport {

	private final String dlqTopic;

	public RetryTopicConfig(@Value("${peer.dlq-topic}") String dlqTopic) {
		this.dlqTopic = dlqTopic;
	}

	/** Resumes the partitions of a retry topic when their records are due (as in the reference). */
	@Bean
	public TaskScheduler retryTopicTaskScheduler() {
		return new ThreadPoolTaskScheduler();
	}

	@Override
	protected RetryTopicComponentFactory createComponentFactory() {
		return new RetryTopicComponentFactory() {

			@Override
			public RetryTopicNamesProviderFactory retryTopicNamesProviderFactory() {
				return new SuffixingRetryTopicNamesProviderFactory() {

					@Override
					public RetryTopicNamesProvider createRetryTopicNamesProvider(DestinationTopic.Properties properties) {
						if (!properties.isDltTopic()) {
							return super.createRetryTopicNamesProvider(properties);
						}
						return new SuffixingRetryTopicNamesProvider(properties) {

							@Override
							public String getTopicName(String topic) {
								return RetryTopicConfig.this.dlqTopic;
							}

						};
					}

				};
			}

		};
	}

}
