package retryd.peers.spring;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;

/**
 * The Spring Kafka peer: a {@code @KafkaListener} with {@code @RetryableTopic}
 * (non-blocking retries over retry topics, then a dead-letter topic).
 */
@SpringBootApplication
public class SpringRetryTopicPeer {

	public static void main(String[] args) {
		SpringApplication.run(SpringRetryTopicPeer.class, args);
	}

}
