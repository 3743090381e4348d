package io.switchman.peers;

/**
 * What {@link DemoService#fail(String)} throws. It lives in the same jar as the interface, so
 * Dubbo's ExceptionFilter passes it to the consumer unwrapped.
 */
public class DemoException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public DemoException() {
        super();
    }

    public DemoException(String message) {
        super(message);
    }
}
