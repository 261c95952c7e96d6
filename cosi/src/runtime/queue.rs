//! The work queue of a queue controller.
//!
//! Items are keyed by (resource, job): reconciling a resource and mapping it
//! are separate items. The queue keeps these promises:
//!
//! - **Deduplication.** Putting an item that is already waiting replaces its
//!   value (the last one observed wins) and never delays it.
//! - **Never twice at once.** An item handed to a worker is on hold until the
//!   worker releases it; putting it meanwhile parks the new value, which is
//!   queued the moment the item is released, so the change is not lost.
//! - **Requeues never postpone.** Requeueing an item at `t` keeps an earlier
//!   scheduled run.
//! - **Fairness.** Items due at the same instant come out in the order they
//!   were put.
//! - **A backoff per failing item, for as long as the item is queued.** An
//!   item's backoff lives beside it and leaves the queue with it (after a
//!   success, or when its controller no longer reads its kind), so the
//!   backoffs never outnumber the items.

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
// Keys are resource pointers (three strings) hashed on every put and pop; Fx
// hashes them several times faster than SipHash, and queue keys come from the
// state, not from an adversary probing for collisions.
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::backoff::{Backoff, BackoffOptions};
use crate::controller::ReducedMetadata;
use crate::resource::Pointer;
use crate::runtime::settle::WorkEpoch;

/// What to do with a resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Job {
    Reconcile,
    Map,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Key {
    pub(crate) pointer: Pointer,
    pub(crate) job: Job,
}

/// An item handed to a worker.
#[derive(Debug)]
pub(crate) struct Item {
    pub(crate) key: Key,
    pub(crate) value: Option<ReducedMetadata>,
}

pub(crate) struct Queue {
    inner: Mutex<Inner>,
    ready: Notify,
    /// Every put, release and drop of items moves pending work: it bumps
    /// the epoch `settled` checks.
    epoch: Arc<WorkEpoch>,
}

#[derive(Default)]
struct Inner {
    /// Items put to run now, in the order they were put: their due times
    /// (the instant of the put) only grow, so this is in due order too.
    now: VecDeque<(Instant, u64, Key)>,
    /// Items scheduled for later (requeues, backoffs), by due time.
    schedule: BTreeSet<(Instant, u64, Key)>,
    /// The due time, sequence and value of each scheduled key.
    scheduled: HashMap<Key, (Instant, u64, Option<ReducedMetadata>)>,
    on_hold: HashSet<Key>,
    parked: HashMap<Key, Option<ReducedMetadata>>,
    /// The backoff of each item that failed last time it ran.
    backoffs: HashMap<Key, Backoff>,
    sequence: u64,
}

impl Queue {
    pub(crate) fn new(epoch: Arc<WorkEpoch>) -> Self {
        Queue { inner: Mutex::default(), ready: Notify::new(), epoch }
    }

    /// Queues `key` now, with `value` replacing any earlier one.
    pub(crate) fn put(&self, key: Key, value: Option<ReducedMetadata>) {
        {
            let mut inner = self.inner.lock();
            if inner.on_hold.contains(&key) {
                inner.parked.insert(key, value);
                drop(inner);
                self.epoch.bump();
                return;
            }
            inner.schedule(key, value, When::Now);
        }
        self.ready.notify_one();
        self.epoch.bump();
    }

    /// Releases an item a worker is done with, queueing it again at `requeue`
    /// (unless it is due earlier anyway) and any value parked meanwhile now.
    pub(crate) fn release(&self, item: Item, requeue: Option<Instant>) {
        {
            let mut inner = self.inner.lock();
            inner.on_hold.remove(&item.key);
            if let Some(at) = requeue {
                inner.schedule(item.key.clone(), item.value, When::At(at));
            }
            if let Some(value) = inner.parked.remove(&item.key) {
                inner.schedule(item.key, value, When::Now);
            }
        }
        self.ready.notify_one();
        self.epoch.bump();
    }

    /// The next due item, waiting until there is one.
    pub(crate) async fn next(&self) -> Item {
        loop {
            let notified = self.ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let due = {
                let mut inner = self.inner.lock();
                match inner.pop_due(Instant::now()) {
                    Ok(item) => return item,
                    Err(due) => due,
                }
            };
            match due {
                Some(due) => {
                    // Biased (both branches just look again): the same choice every run.
                    tokio::select! {
                        biased;
                        () = notified => (),
                        () = tokio::time::sleep_until(due) => (),
                    }
                }
                None => notified.await,
            }
        }
    }

    /// The wait before retrying `key`, which just failed: its backoff's next delay.
    pub(crate) fn next_backoff(&self, key: &Key, options: BackoffOptions) -> Duration {
        let mut inner = self.inner.lock();
        if let Some(backoff) = inner.backoffs.get_mut(key) {
            return backoff.next_delay();
        }
        let mut backoff = Backoff::new(options);
        let delay = backoff.next_delay();
        inner.backoffs.insert(key.clone(), backoff);
        delay
    }

    /// Forgets `key`'s backoff, after a success.
    pub(crate) fn forget_backoff(&self, key: &Key) {
        self.inner.lock().backoffs.remove(key);
    }

    /// Drops the waiting items (and the backoffs) whose key `keep` refuses;
    /// an item on hold is left to its worker.
    pub(crate) fn retain(&self, keep: impl Fn(&Key) -> bool) {
        let mut inner = self.inner.lock();
        let Inner { now, schedule, scheduled, on_hold, parked, backoffs, .. } = &mut *inner;
        now.retain(|(_, _, key)| keep(key));
        schedule.retain(|(_, _, key)| keep(key));
        scheduled.retain(|key, _| keep(key));
        parked.retain(|key, _| keep(key));
        backoffs.retain(|key, _| on_hold.contains(key) || keep(key));
        drop(inner);
        self.epoch.bump();
    }

    /// Items that failed and wait out their backoff.
    pub(crate) fn backing_off(&self) -> usize {
        self.inner.lock().backoffs.len()
    }

    /// Items waiting, parked ones included.
    pub(crate) fn len(&self) -> usize {
        let inner = self.inner.lock();
        inner.scheduled.len() + inner.parked.len()
    }

    /// Whether no item is due by `now`, handed to a worker or parked: items
    /// scheduled later (requeues, retries in backoff) do not count.
    pub(crate) fn is_idle(&self, now: Instant) -> bool {
        let inner = self.inner.lock();
        inner.on_hold.is_empty() && inner.now.is_empty() && inner.schedule.first().is_none_or(|(due, _, _)| *due > now)
    }
}

impl Inner {
    /// Schedules `key`: now (a put, its value replacing a waiting one's), or
    /// at a later instant (a requeue, which keeps the waiting value). An
    /// item already waiting runs at the earlier of its two times.
    fn schedule(&mut self, key: Key, value: Option<ReducedMetadata>, when: When) {
        let (at, put) = match when {
            When::Now => (Instant::now(), true),
            When::At(at) => (at, false),
        };
        if let Some((due, sequence, old)) = self.scheduled.get_mut(&key) {
            if put {
                *old = value;
            }
            // Only an item scheduled for later can be moved earlier: one put
            // to run now is due already.
            if at < *due {
                let earlier = (at, self.sequence + 1);
                self.schedule.remove(&(*due, *sequence, key.clone()));
                (*due, *sequence) = earlier;
                self.enqueue(at, put, key);
            }
            return;
        }
        self.enqueue(at, put, key.clone());
        self.scheduled.insert(key, (at, self.sequence, value));
    }

    /// Takes the next sequence number for `key` due `at`: behind the items
    /// put to run now (`put`), else among those scheduled for later.
    fn enqueue(&mut self, at: Instant, put: bool, key: Key) {
        self.sequence += 1;
        if put {
            self.now.push_back((at, self.sequence, key));
        } else {
            self.schedule.insert((at, self.sequence, key));
        }
    }

    /// The first item due by `now`, put on hold; or when the next one is due.
    fn pop_due(&mut self, now: Instant) -> Result<Item, Option<Instant>> {
        // The earlier of the two heads, by due time and then by order.
        let later = self.schedule.first().filter(|(due, _, _)| *due <= now);
        let from_now = match (self.now.front(), later) {
            (Some(put), Some(later)) => (put.0, put.1) <= (later.0, later.1),
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return Err(self.schedule.first().map(|(due, _, _)| *due)),
        };
        let (_, _, key) = match from_now {
            true => self.now.pop_front(),
            false => self.schedule.pop_first(),
        }
        .ok_or(None)?;
        let (_, _, value) = self.scheduled.remove(&key).ok_or(None)?;
        self.on_hold.insert(key.clone());
        Ok(Item { key, value })
    }
}

/// When an item is to run.
#[derive(Clone, Copy)]
enum When {
    /// As soon as a worker is free (a change of its resource).
    Now,
    /// Not before this instant (a requeue or a retry).
    At(Instant),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(id: &str) -> Key {
        Key { pointer: Pointer::new("default", "Tests.cosi.dev", id), job: Job::Reconcile }
    }

    #[tokio::test(start_paused = true)]
    async fn items_come_out_in_order_once_and_never_twice_at_once() {
        let queue = Queue::new(Arc::default());
        queue.put(key("a"), None);
        queue.put(key("b"), None);
        queue.put(key("a"), None);
        assert_eq!(queue.len(), 2);

        let a = queue.next().await;
        assert_eq!(a.key, key("a"));
        // `a` is on hold: a new put parks it instead of handing it out again.
        queue.put(key("a"), None);
        let b = queue.next().await;
        assert_eq!(b.key, key("b"));
        assert_eq!(queue.len(), 1);
        let nothing = tokio::time::timeout(Duration::from_secs(1), queue.next()).await;
        assert!(nothing.is_err(), "a parked item came out while on hold");

        queue.release(a, None);
        let again = queue.next().await;
        assert_eq!(again.key, key("a"));
        queue.release(again, None);
        queue.release(b, None);
        assert_eq!(queue.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn retain_drops_items_and_their_backoffs() {
        let queue = Queue::new(Arc::default());
        let options = crate::runtime::BackoffOptions::default();
        for id in ["a", "b", "c"] {
            queue.put(key(id), None);
            let item = queue.next().await;
            queue.next_backoff(&item.key, options);
            queue.release(item, Some(Instant::now() + Duration::from_secs(1)));
        }
        queue.put(key("d"), None);
        let on_hold = queue.next().await;
        queue.next_backoff(&on_hold.key, options);
        assert_eq!((queue.len(), queue.backing_off()), (3, 4));
        queue.retain(|key| key.pointer.id() == "b");
        assert_eq!((queue.len(), queue.backing_off()), (1, 2), "b is kept, d is on hold");
        queue.forget_backoff(&on_hold.key);
        queue.release(on_hold, None);
        assert_eq!(queue.next().await.key, key("b"));
        assert_eq!((queue.len(), queue.backing_off()), (0, 1));
    }

    #[tokio::test(start_paused = true)]
    async fn requeue_waits_and_never_postpones() {
        let queue = Queue::new(Arc::default());
        queue.put(key("a"), None);
        let item = queue.next().await;
        let start = Instant::now();
        queue.release(item, Some(start + Duration::from_secs(10)));
        let item = queue.next().await;
        assert_eq!(Instant::now() - start, Duration::from_secs(10));

        // Requeued at +10 s, then put now: it comes out now, not later.
        queue.release(item, Some(Instant::now() + Duration::from_secs(10)));
        queue.put(key("a"), None);
        let start = Instant::now();
        let item = queue.next().await;
        assert_eq!(Instant::now(), start);
        // Requeued at +100 s while due at +1 s: +1 s wins.
        queue.release(item, Some(Instant::now() + Duration::from_secs(1)));
        let mut inner = queue.inner.lock();
        let due = inner.scheduled[&key("a")].0;
        inner.schedule(key("a"), None, When::At(due + Duration::from_secs(99)));
        assert_eq!(inner.scheduled[&key("a")].0, due);
    }
}
