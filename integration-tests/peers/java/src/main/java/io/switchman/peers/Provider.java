package io.switchman.peers;

import org.apache.dubbo.config.ApplicationConfig;
import org.apache.dubbo.config.ProtocolConfig;
import org.apache.dubbo.config.RegistryConfig;
import org.apache.dubbo.config.ServiceConfig;
import org.apache.dubbo.config.SslConfig;
import org.apache.dubbo.config.bootstrap.DubboBootstrap;

import io.switchman.peers.idl.Greeter;
import io.switchman.peers.idl.IdlGreeter;


import java.io.IOException;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

/**
 * Exports {@link DemoService} over dubbo:// or tri:// on 127.0.0.1 and registers it, then prints
 * {@code READY <protocol> <port>}. SIGTERM runs Dubbo's own shutdown hook (graceful).
 * {@code --service idl} exports the protobuf service of {@code greeter.proto} instead
 * ({@link IdlGreeter}, over {@code tri}).
 * {@code --demo-service v2} states that the upgraded {@link DemoService} (one more method) is the
 * one on the classpath, i.e. that the program runs from {@code switchman-java-peers-v2.jar}.
 */
final class Provider {
    private Provider() {}

    static int run(Args a) throws Exception {
        LoopbackConfiguratorFactory.pinLocalHost();
        PrintStream out = Main.STDOUT;
        String protocol = a.get("protocol", "dubbo");
        String registry = a.require("registry");
        int port = a.getInt("port", 0);
        if (port == 0) {
            port = freePort();
        }
        String name = a.get("name", "127.0.0.1:" + port);
        String release = a.get("demo-service", "v1");
        if (!release.equals("v1") && !release.equals("v2")) {
            throw new IllegalArgumentException("--demo-service must be v1 or v2, got " + release);
        }
        if (!release.equals(demoServiceRelease())) {
            throw new IllegalArgumentException("--demo-service " + release
                    + ": the io.switchman.peers.DemoService on the classpath is "
                    + demoServiceRelease() + " (java -jar switchman-java-peers.jar runs v1, "
                    + "java -jar switchman-java-peers-v2.jar v2)");
        }

        ApplicationConfig app = new ApplicationConfig(a.get("application", "switchman-java-provider"));
        app.setQosEnable(false);
        app.setRegisterMode(a.get("register-mode", "interface"));
        app.setMetadataType(a.get("metadata-type", "local"));
        app.setShutwait(String.valueOf(a.getInt("shutdown-wait-ms", 2000)));
        // Several providers of one application run at once: no shared cache files in ~/.dubbo.
        app.setEnableFileCache(false);

        RegistryConfig reg = new RegistryConfig(registry);

        ProtocolConfig pc = new ProtocolConfig(protocol, port);
        pc.setHost("127.0.0.1");
        if (a.has("heartbeat-ms")) {
            pc.setHeartbeat(a.getInt("heartbeat-ms", null));
        }

        // TLS (Dubbo's SslConfig): the provider then serves TLS on its own port (it detects the
        // handshake), refuses cleartext on dubbo://, and with --tls-trust requires a client
        // certificate signed by it (mTLS). Dubbo registers `ssl-enabled=true` only when the
        // protocol says so (ProtocolConfig.sslEnabled); --tls-advertise false leaves it out.
        SslConfig ssl = null;
        if (a.has("tls-cert-chain")) {
            ssl = new SslConfig();
            ssl.setServerKeyCertChainPath(a.require("tls-cert-chain"));
            ssl.setServerPrivateKeyPath(a.require("tls-key"));
            if (a.has("tls-trust")) {
                ssl.setServerTrustCertCollectionPath(a.require("tls-trust"));
            }
            if (!"false".equals(a.get("tls-advertise", "true"))) {
                pc.setSslEnabled(true);
            }
        } else if (a.has("tls-key") || a.has("tls-trust")) {
            throw new IllegalArgumentException("--tls-key and --tls-trust need --tls-cert-chain");
        }

        Map<String, String> params = new LinkedHashMap<>();
        for (String kv : a.all("param")) {
            int eq = kv.indexOf('=');
            if (eq <= 0) {
                throw new IllegalArgumentException("--param needs k=v, got " + kv);
            }
            params.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        // `--group g1,g2` exports the service once per group on the same port (one process,
        // several endpoints at one address); each answers as `<name>/<group>`.
        String[] groups = a.has("group") ? a.get("group", null).split(",") : new String[] {null};
        // `--service idl` exports the protobuf service of greeter.proto (IdlGreeter, on the stub
        // Dubbo's compiler plugin generated) instead of DemoService.
        String service = a.get("service", "demo");
        if (!service.equals("demo") && !service.equals("idl")) {
            throw new IllegalArgumentException("--service must be demo or idl, got " + service);
        }
        List<ServiceConfig<?>> services = new ArrayList<>();
        for (String group : groups) {
            String instanceName = groups.length > 1 ? name + "/" + group : name;
            ServiceConfig<?> svc;
            if (service.equals("idl")) {
                ServiceConfig<Greeter> idl = new ServiceConfig<>();
                idl.setInterface(Greeter.class);
                idl.setRef(new IdlGreeter(instanceName, out));
                svc = idl;
            } else {
                ServiceConfig<DemoService> demo = new ServiceConfig<>();
                demo.setInterface(DemoService.class);
                demo.setRef(new DemoServiceImpl(instanceName, out));
                svc = demo;
            }
            if (group != null) {
                svc.setGroup(group);
            }
            if (a.has("version")) {
                svc.setVersion(a.get("version", null));
            }
            if (a.has("weight")) {
                svc.setWeight(a.getInt("weight", null));
            }
            if (!params.isEmpty()) {
                svc.setParameters(params);
            }
            services.add(svc);
        }

        long t0 = System.nanoTime();
        DubboBootstrap bootstrap = DubboBootstrap.getInstance()
                .application(app)
                .registry(reg)
                .protocol(pc)
                .services(new ArrayList<>(services));
        if (ssl != null) {
            bootstrap.ssl(ssl);
        }
        bootstrap.start();
        System.err.printf("[java-peer] provider %s (%s) exported and registered in %d ms%n",
                name, service.equals("idl") ? Greeter.SERVICE_NAME + " (IDL)" : "DemoService " + release, (System.nanoTime() - t0) / 1_000_000);
        synchronized (out) {
            out.println("READY " + protocol + " " + port);
            out.flush();
        }
        // Serve until SIGTERM (Dubbo's shutdown hook runs) or SIGKILL.
        new CountDownLatch(1).await();
        return 0;
    }

    /**
     * Which release of {@link DemoService} the classpath holds: {@code v2} (from
     * {@code switchman-java-peers-v2.jar}, first on its classpath) has {@code greet(String)}.
     * By reflection, since this class is compiled against v1.
     */
    static String demoServiceRelease() {
        try {
            DemoService.class.getMethod("greet", String.class);
            return "v2";
        } catch (NoSuchMethodException e) {
            return "v1";
        }
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getByName("127.0.0.1"))) {
            return s.getLocalPort();
        }
    }
}
