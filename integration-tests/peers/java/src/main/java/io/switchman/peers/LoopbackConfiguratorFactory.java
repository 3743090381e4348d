package io.switchman.peers;

import org.apache.dubbo.common.URL;
import org.apache.dubbo.common.utils.NetUtils;
import org.apache.dubbo.rpc.cluster.Configurator;
import org.apache.dubbo.rpc.cluster.ConfiguratorFactory;

import java.lang.reflect.Field;
import java.net.InetAddress;

/**
 * Keeps providers and consumers on loopback (the tests' servers listen on 127.0.0.1 only).
 *
 * <p>Consumers: Dubbo's client replaces a 127.x provider host by the machine's "local host"
 * (NetUtils.filterLocalHost), i.e. its first non-loopback address, where nothing listens.
 * {@link #pinLocalHost()} makes that local host 127.0.0.1.
 *
 * <p>Providers: stock Dubbo treats every 127.x host as "not configured": it
 * registers the machine's first non-loopback address and binds 0.0.0.0 (NetUtils.isInvalidLocalHost
 * in ServiceConfig.findConfiguredHosts and AbstractServer). Stock Dubbo treats every 127.x host as "not configured": it
 * registers the machine's first non-loopback address and binds 0.0.0.0 (NetUtils.isInvalidLocalHost
 * in ServiceConfig.findConfiguredHosts and AbstractServer). ServiceConfig.buildUrl passes every
 * provider URL through the ConfiguratorFactory extension named like its protocol, so this one,
 * registered for {@code dubbo} and {@code tri} in
 * META-INF/dubbo/org.apache.dubbo.rpc.cluster.ConfiguratorFactory, rewrites the URL: host
 * 127.0.0.1 (what is registered), anyhost=false, and bind.ip {@code ::ffff:127.0.0.1}, the
 * IPv4-mapped spelling of 127.0.0.1 that the server's check does not recognise and Java resolves
 * to 127.0.0.1, so the server socket listens on 127.0.0.1 only.
 */
public class LoopbackConfiguratorFactory implements ConfiguratorFactory {
    static final String HOST = "127.0.0.1";
    static final String BIND_IP = "::ffff:127.0.0.1";

    /**
     * Sets Dubbo's cached local address (NetUtils.HOST_ADDRESS and LOCAL_ADDRESS, computed once
     * from the network interfaces) to 127.0.0.1 before anything reads it.
     *
     * @throws IllegalStateException when this Dubbo version has no such fields
     */
    static void pinLocalHost() {
        try {
            Field host = NetUtils.class.getDeclaredField("HOST_ADDRESS");
            host.setAccessible(true);
            host.set(null, HOST);
            Field address = NetUtils.class.getDeclaredField("LOCAL_ADDRESS");
            address.setAccessible(true);
            address.set(null, InetAddress.getByAddress(new byte[] {127, 0, 0, 1}));
        } catch (ReflectiveOperationException | java.net.UnknownHostException e) {
            throw new IllegalStateException("cannot pin Dubbo's local host to 127.0.0.1: " + e, e);
        }
        if (!HOST.equals(NetUtils.getLocalHost())) {
            throw new IllegalStateException("Dubbo's local host is " + NetUtils.getLocalHost() + ", not " + HOST);
        }
    }

    @Override
    public Configurator getConfigurator(URL url) {
        return new Configurator() {
            @Override
            public URL getUrl() {
                return url;
            }

            @Override
            public URL configure(URL u) {
                return u.setHost(HOST).addParameter("anyhost", "false").addParameter("bind.ip", BIND_IP);
            }
        };
    }
}
