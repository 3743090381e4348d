//! The cluster invoker as a `tower::Layer` over a transport.

use std::fmt;
use std::sync::Arc;

use switchman_core::Invoker;
use switchman_discovery::Directory;

use crate::{BudgetConfig, ClusterConfig, ClusterInvoker};

/// Wraps a transport ([`Invoker`]: one attempt to one instance) in a [`ClusterInvoker`] over
/// `directory`: routing, balancing and the fault-tolerance strategy, as a `tower::Layer`.
///
/// ```no_run
/// # use std::sync::Arc;
/// # use switchman_cluster::{ClusterConfig, ClusterLayer, ProtocolInvoker};
/// # use switchman_discovery::{DirectoryConfig, FixedDirectory};
/// # use switchman_core::{Instance, ServiceKey};
/// use tower_layer::Layer;
/// let config = DirectoryConfig::new(ServiceKey::new("com.foo.Greeter"));
/// let directory = Arc::new(FixedDirectory::new(&config, [Instance::builder("10.0.0.1", 50051).build()]));
/// let cluster = ClusterLayer::new(directory, ClusterConfig::default()).layer(ProtocolInvoker::new());
/// ```
#[derive(Clone)]
pub struct ClusterLayer {
    directory: Arc<dyn Directory>,
    config: ClusterConfig,
    budget: Option<Option<BudgetConfig>>,
}

impl fmt::Debug for ClusterLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterLayer")
            .field("service", self.directory.snapshot().service())
            .finish_non_exhaustive()
    }
}

impl ClusterLayer {
    /// A layer making cluster invokers over `directory` with `config` (and the default retry
    /// budget, as [`ClusterInvoker::new`]).
    pub fn new(directory: Arc<dyn Directory>, config: ClusterConfig) -> Self {
        ClusterLayer {
            directory,
            config,
            budget: None,
        }
    }

    /// Sets (or, with `None`, removes) the retry budget of the invokers made.
    pub fn budget(mut self, budget: Option<BudgetConfig>) -> Self {
        self.budget = Some(budget);
        self
    }
}

impl<I: Invoker + 'static> tower_layer::Layer<I> for ClusterLayer {
    type Service = ClusterInvoker;

    fn layer(&self, transport: I) -> ClusterInvoker {
        let c = ClusterInvoker::new(
            self.directory.clone(),
            Arc::new(transport),
            self.config.clone(),
        );
        match self.budget {
            Some(b) => c.with_budget(b),
            None => c,
        }
    }
}
