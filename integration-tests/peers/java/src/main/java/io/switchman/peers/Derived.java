package io.switchman.peers;

import java.util.List;

/**
 * A subclass of {@link Base} with fields of its own: hessian-lite writes one class definition
 * with the fields of both classes. Compared field by field (superclass too) by the vectors.
 */
public class Derived extends Base {
    private static final long serialVersionUID = 1L;

    int level;
    List<String> roles;
    Color color;

    public Derived() {}

    static Derived sample() {
        Derived d = new Derived();
        d.id = 9;
        d.name = "sub";
        d.since = new java.util.Date(1700000000123L);
        d.level = 4;
        d.roles = new java.util.ArrayList<>(java.util.Arrays.asList("admin", "ops"));
        d.color = Color.GREEN;
        return d;
    }
}
