package io.switchman.peers;

import java.io.PrintStream;

/** The upgraded release of the provider's implementation: the base methods plus {@code greet}. */
public class DemoServiceImpl extends DemoServiceBase implements DemoService {
    public DemoServiceImpl(String instanceName, PrintStream out) {
        super(instanceName, out);
    }

    @Override
    public String greet(String name) {
        call("greet");
        return "greetings, " + name + " from " + instanceName + " (v2)";
    }
}
