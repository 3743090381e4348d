package io.switchman.peers;

/** An enum for the Hessian2 vectors. */
public enum Color {
    RED,
    GREEN,
    BLUE
}
