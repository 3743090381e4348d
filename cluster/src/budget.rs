//! Retry budget: retries may add at most a fraction of the calls (20%) plus a floor (10 per
//! second) over a sliding window (10 s): the Finagle/linkerd/Envoy default. Dubbo has no budget;
//! with `retries=2` a fleet-wide outage triples the load on whatever is left. Lock-free: one
//! atomic bucket per second of the window.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use switchman_core::Tick;
use tokio::time::Instant;

/// Budget parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetConfig {
    /// Retries allowed per first attempt (0.2 = 20%).
    pub ratio: f64,
    /// Retries always allowed per second, whatever the traffic.
    pub min_per_sec: u32,
    /// Window length (whole seconds).
    pub window: Duration,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        BudgetConfig {
            ratio: 0.2,
            min_per_sec: 10,
            window: Duration::from_secs(10),
        }
    }
}

const SLOTS: usize = 10;
/// A slot's generation while one thread empties it.
const RESETTING: u64 = u64::MAX;

/// tokio's clock (paused in tests) as a [`Tick`].
fn tick_now() -> Tick {
    Tick::of(Instant::now().into_std())
}

/// A lock-free retry budget shared by every strategy of one service.
#[derive(Debug)]
pub struct RetryBudget {
    config: BudgetConfig,
    start: Tick,
    slot_secs: u64,
    /// (generation, deposits, withdrawals) per slot; a slot whose generation is stale is empty.
    generation: [AtomicU64; SLOTS],
    deposits: [AtomicU64; SLOTS],
    withdrawals: [AtomicU64; SLOTS],
    refused: AtomicU64,
}

impl RetryBudget {
    /// A budget with `config`.
    pub fn new(config: BudgetConfig) -> Self {
        let slot_secs = (config.window.as_secs() / SLOTS as u64).max(1);
        RetryBudget {
            config,
            start: tick_now(),
            slot_secs,
            generation: Default::default(),
            deposits: Default::default(),
            withdrawals: Default::default(),
            refused: AtomicU64::new(0),
        }
    }

    fn now_gen(&self) -> u64 {
        self.gen_at(tick_now())
    }

    fn gen_at(&self, now: Tick) -> u64 {
        now.saturating_since(self.start).as_secs() / self.slot_secs + 1
    }

    /// The slot of `generation`, emptied first if it still holds an older generation. The
    /// emptying thread parks the slot at [`RESETTING`] while it zeroes the counters, so no
    /// increment of the new generation can land before the zeroing and be wiped by it.
    fn slot(&self, generation: u64) -> usize {
        let i = (generation % SLOTS as u64) as usize;
        loop {
            let seen = self.generation[i].load(Ordering::Acquire);
            if seen == RESETTING {
                std::hint::spin_loop();
                continue;
            }
            // Current, or (a caller stalled for a whole window) newer: count into it.
            if seen >= generation {
                return i;
            }
            if self.generation[i]
                .compare_exchange(seen, RESETTING, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                self.deposits[i].store(0, Ordering::Release);
                self.withdrawals[i].store(0, Ordering::Release);
                self.generation[i].store(generation, Ordering::Release);
                return i;
            }
        }
    }

    /// Records a call (a first attempt).
    pub fn deposit(&self) {
        self.deposit_at(tick_now());
    }

    /// [`RetryBudget::deposit`] at `now`, a clock read the caller has already made.
    pub fn deposit_at(&self, now: Tick) {
        let i = self.slot(self.gen_at(now));
        self.deposits[i].fetch_add(1, Ordering::AcqRel);
    }

    /// Asks for one retry; `true` means go ahead (and it is counted), `false` means the budget is
    /// spent (counted as refused).
    pub fn withdraw(&self) -> bool {
        let g = self.now_gen();
        let i = self.slot(g);
        let window_start = g.saturating_sub(SLOTS as u64 - 1);
        let (mut deposits, mut others) = (0u64, 0u64);
        for k in 0..SLOTS {
            let gen_k = self.generation[k].load(Ordering::Acquire);
            if gen_k >= window_start && gen_k <= g {
                deposits += self.deposits[k].load(Ordering::Acquire);
                if k != i {
                    others += self.withdrawals[k].load(Ordering::Acquire);
                }
            }
        }
        let reserve = self.config.min_per_sec as f64 * (self.slot_secs * SLOTS as u64) as f64;
        let allowed = reserve + self.config.ratio * deposits as f64;
        // Take first, then check what was there before us: concurrent callers at the limit
        // are ordered by the atomic add, so the budget is never exceeded (a check followed by
        // an add would let racing callers all pass).
        let before = self.withdrawals[i].fetch_add(1, Ordering::AcqRel);
        if ((others + before) as f64) < allowed {
            true
        } else {
            self.withdrawals[i].fetch_sub(1, Ordering::AcqRel);
            self.refused.fetch_add(1, Ordering::Relaxed);
            false
        }
    }

    pub(crate) fn config_copy(&self) -> BudgetConfig {
        self.config
    }

    /// Retries refused so far.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn floor_then_ratio_then_window_slides() {
        let b = RetryBudget::new(BudgetConfig::default());
        // No traffic: the floor (10/s over 10 s = 100) is available.
        let granted = (0..1000).filter(|_| b.withdraw()).count();
        assert_eq!(granted, 100);
        // 1,000 calls add 200 more.
        for _ in 0..1000 {
            b.deposit();
        }
        let granted = (0..1000).filter(|_| b.withdraw()).count();
        assert_eq!(granted, 200);
        assert_eq!(b.refused(), 900 + 800);
        // After the window has passed, the floor is back.
        tokio::time::advance(Duration::from_secs(11)).await;
        let granted = (0..1000).filter(|_| b.withdraw()).count();
        assert_eq!(granted, 100);
    }

    /// Callers racing at the limit never get more than the budget (they used to: each checked
    /// the count, then added to it).
    #[test]
    fn concurrent_callers_never_exceed_the_budget() {
        use std::sync::{Arc, Barrier};
        for _ in 0..300 {
            let b = Arc::new(RetryBudget::new(BudgetConfig::default()));
            let barrier = Arc::new(Barrier::new(4));
            let granted: usize = (0..4)
                .map(|_| {
                    let (b, barrier) = (b.clone(), barrier.clone());
                    std::thread::spawn(move || {
                        barrier.wait();
                        (0..200).filter(|_| b.withdraw()).count()
                    })
                })
                .collect::<Vec<_>>()
                .into_iter()
                .map(|t| t.join().unwrap())
                .sum();
            assert_eq!(granted, 100, "the floor is 10/s over 10 s");
            assert_eq!(b.refused(), 800 - 100);
        }
    }
}
