package io.switchman.peers;

import java.io.Serializable;
import java.util.Date;

/** A superclass with fields, for the inheritance vectors (see {@link Derived}). */
public class Base implements Serializable {
    private static final long serialVersionUID = 1L;

    long id;
    String name;
    Date since;

    public Base() {}
}
