package io.switchman.peers;

import java.io.Serializable;
import java.math.BigDecimal;
import java.util.Date;

/**
 * Every primitive and its box, and the nullable reference types of the mapping table: {@link
 * #sample()} fills them all, {@link #nulls()} leaves every nullable one null.
 *
 * <p>No primitive {@code float} field: hessian-lite 4.0.4 (Dubbo 3.3.6) reads one with {@code
 * Unsafe.putDouble} (FieldDeserializer2FactoryUnsafe$FloatFieldDeserializer), 8 bytes into a
 * 4-byte field, which garbles the field and its neighbour even from Java's own bytes. The boxed
 * {@code Float bf} is read correctly.
 */
public class Prims implements Serializable {
    private static final long serialVersionUID = 1L;

    byte b;
    short s;
    int i;
    long l;
    double d;
    char c;
    boolean z;
    Byte bb;
    Short bs;
    Integer bi;
    Long bl;
    Float bf;
    Double bd;
    Character bc;
    Boolean bz;
    String str;
    Date date;
    BigDecimal dec;
    byte[] bytes;

    public Prims() {}

    static Prims sample() {
        Prims p = new Prims();
        p.b = -5;
        p.s = 1000;
        p.i = -70000;
        p.l = 1L << 40;
        p.d = -2.5;
        p.c = '\u00e9';
        p.z = true;
        p.bb = 127;
        p.bs = -32768;
        p.bi = 48;
        p.bl = -9L;
        p.bf = 0.3f;
        p.bd = 1e300;
        p.bc = 'x';
        p.bz = false;
        p.str = "s";
        p.date = new Date(1700000040000L);
        p.dec = new BigDecimal("-0.000120");
        p.bytes = new byte[] {0, 1, (byte) 255};
        return p;
    }

    static Prims nulls() {
        return new Prims();
    }
}
