use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::weights::{
    MemberWeights, Sampler, member_weights, patched_weights, same_members, weighted_untried,
};
use crate::{Endpoint, LoadBalance, PickContext, Picker};

/// Dubbo's `random`: weighted random. The table is an alias table (Vose), so a pick is O(1)
/// whatever the weights: one uniform column draw and one threshold draw. When all weights are
/// equal it is a single uniform draw. Zero-weight members are never picked while others exist;
/// when every weight is zero the pick is uniform (as in Dubbo).
#[derive(Debug, Default, Clone, Copy)]
pub struct RandomBalance;

impl LoadBalance for RandomBalance {
    fn name(&self) -> &str {
        "random"
    }

    fn prepare(
        &self,
        endpoints: &[Endpoint],
        members: Arc<[u32]>,
        now: SystemTime,
    ) -> Box<dyn Picker> {
        let w = member_weights(endpoints, &members, now);
        RandomPicker::boxed(members, w)
    }
}

impl RandomPicker {
    fn boxed(members: Arc<[u32]>, w: MemberWeights) -> Box<dyn Picker> {
        Box::new(RandomPicker {
            sampler: Sampler::new(&w.weights, &members),
            weights: w.weights.into_boxed_slice(),
            members,
            refresh: w.refresh,
        })
    }
}

#[derive(Debug)]
struct RandomPicker {
    members: Arc<[u32]>,
    sampler: Sampler,
    /// Effective weights, in member order (for the reselect).
    weights: Box<[u32]>,
    refresh: Option<Duration>,
}

impl Picker for RandomPicker {
    fn pick(
        &self,
        _endpoints: &[Endpoint],
        _ctx: &PickContext<'_>,
        rng: &mut fastrand::Rng,
    ) -> Option<usize> {
        self.sampler.sample(rng)
    }

    fn members(&self) -> &[u32] {
        &self.members
    }

    fn refresh_after(&self) -> Option<Duration> {
        self.refresh
    }

    fn settled_weights(&self) -> Option<&[u32]> {
        self.refresh.is_none().then_some(&*self.weights)
    }

    fn patched(
        &self,
        endpoints: &[Endpoint],
        members: &Arc<[u32]>,
        changed: &[u32],
        now: SystemTime,
    ) -> Option<Box<dyn Picker>> {
        let settled = self.settled_weights()?;
        if !same_members(&self.members, members) {
            return None;
        }
        let w = patched_weights(endpoints, members, settled, changed, now);
        Some(RandomPicker::boxed(members.clone(), w))
    }

    /// Dubbo's reselect runs the balancer over the untried members: a weighted draw among
    /// them. Redraws from the whole table until one lands on an untried member (each accepted
    /// draw has exactly that distribution, O(1) each); after `RESELECT_TRIES` misses (the
    /// tried members hold most of the weight) one pass over the members draws it directly.
    fn pick_untried(
        &self,
        _endpoints: &[Endpoint],
        ctx: &PickContext<'_>,
        rng: &mut fastrand::Rng,
    ) -> Option<usize> {
        for _ in 0..crate::RESELECT_TRIES {
            let i = self.sampler.sample(rng)?;
            if !ctx.tried.contains(&i) {
                return Some(i);
            }
        }
        weighted_untried(&self.members, &self.weights, ctx.tried, rng)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_endpoints as eps;
    use switchman_core::Invocation;

    #[test]
    fn weighted_shares_follow_weights_and_skip_zero() {
        let e = eps(&[1, 0, 3]);
        let members: Arc<[u32]> = (0..3).collect();
        let p = RandomBalance.prepare(&e, members, SystemTime::now());
        let inv = Invocation::new("m");
        let ctx = PickContext {
            invocation: &inv,
            tried: &[],
        };
        let mut rng = fastrand::Rng::with_seed(7);
        let mut hits = [0u32; 3];
        for _ in 0..40_000 {
            hits[p.pick(&e, &ctx, &mut rng).unwrap()] += 1;
        }
        assert_eq!(hits[1], 0);
        let share = hits[2] as f64 / 40_000.0;
        assert!((share - 0.75).abs() < 0.02, "{hits:?}");
    }

    #[test]
    fn untried_members_are_preferred() {
        let e = eps(&[100, 100, 100]);
        let p = RandomBalance.prepare(&e, (0..3).collect(), SystemTime::now());
        let inv = Invocation::new("m");
        let mut rng = fastrand::Rng::with_seed(1);
        for _ in 0..1000 {
            let ctx = PickContext {
                invocation: &inv,
                tried: &[0, 2],
            };
            assert_eq!(crate::pick_untried(p.as_ref(), &e, &ctx, &mut rng), Some(1));
        }
        let ctx = PickContext {
            invocation: &inv,
            tried: &[0, 1, 2],
        };
        assert!(crate::pick_untried(p.as_ref(), &e, &ctx, &mut rng).is_some());
    }
}
