package io.switchman.peers;

import java.io.PrintStream;

/**
 * The provider's implementation of {@link DemoService} (the methods are {@link DemoServiceBase}'s).
 * The upgraded release, {@code src/v2/java/io/switchman/peers/DemoServiceImpl.java}, has the same
 * name and adds {@code greet}.
 */
public class DemoServiceImpl extends DemoServiceBase implements DemoService {
    public DemoServiceImpl(String instanceName, PrintStream out) {
        super(instanceName, out);
    }
}
