package io.switchman.peers;

import java.io.Serializable;

/** A class without fields (a Rust unit struct). */
public class Empty implements Serializable {
    private static final long serialVersionUID = 1L;

    public Empty() {}
}
