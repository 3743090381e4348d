package io.switchman.peers;

import java.io.Serializable;

/** A linked node: a chain, or a cycle (a node that is its own next, two nodes in a ring). */
public class Node implements Serializable {
    private static final long serialVersionUID = 1L;

    String name;
    Node next;

    public Node() {}

    Node(String name, Node next) {
        this.name = name;
        this.next = next;
    }
}
