package io.switchman.peers;

import java.util.List;
import java.util.Map;

/**
 * The upgraded release of {@code io.switchman.peers.DemoService}: the same interface name with one
 * more method, {@link #greet(String)}. Compiled into {@code switchman-java-peers-v2.jar}, which
 * comes first on the classpath and so shadows the release in {@code src/main/java} (this file
 * repeats that one's methods: keep the two in step).
 */
public interface DemoService {
    /** {@code "hello, " + name + " from " + instanceName}. */
    String sayHello(String name);

    int add(int a, int b);

    /** The size of {@code items}. */
    long count(List<String> items);

    /** A user filled deterministically from {@code id} ({@link User#sample(long)}). */
    User getUser(long id);

    /** The same user, {@code name} suffixed {@code " (saved)"}. */
    User save(User user);

    /** {@code m} unchanged. */
    Map<String, Object> echo(Map<String, Object> m);

    void ping();

    /** Returns null. */
    String nothing();

    /** Throws {@link DemoException}{@code (message)}. */
    String fail(String message) throws DemoException;

    /** Sleeps {@code ms}, then returns {@code "slow " + ms + " from " + instanceName}. */
    String slow(int ms);

    /** The instance name. */
    String whoami();

    /**
     * The value of the request attachment {@code key} (null when absent); the answer carries
     * the attachment {@code served-by} = instanceName back to the consumer.
     */
    String attachment(String key);

    /** New in v2: {@code "greetings, " + name + " from " + instanceName + " (v2)"}. */
    String greet(String name);
}
