package io.switchman.peers.oracle;

import java.util.List;

import org.apache.dubbo.rpc.Invocation;
import org.apache.dubbo.rpc.Invoker;
import org.apache.dubbo.rpc.Result;
import org.apache.dubbo.rpc.cluster.Directory;
import org.apache.dubbo.rpc.cluster.LoadBalance;
import org.apache.dubbo.rpc.cluster.support.AbstractClusterInvoker;

/**
 * Exposes {@code AbstractClusterInvoker.select}: a cluster strategy's pick with the invokers
 * already tried in the call ({@code selected}), i.e. Dubbo's reselect for retries.
 */
final class ClusterProbe<T> extends AbstractClusterInvoker<T> {
    ClusterProbe(Directory<T> directory) {
        super(directory);
    }

    Invoker<T> pick(LoadBalance lb, Invocation invocation, List<Invoker<T>> invokers, List<Invoker<T>> selected) {
        return select(lb, invocation, invokers, selected);
    }

    @Override
    protected Result doInvoke(Invocation invocation, List<Invoker<T>> invokers, LoadBalance loadbalance) {
        throw new UnsupportedOperationException("the oracle never invokes");
    }
}
