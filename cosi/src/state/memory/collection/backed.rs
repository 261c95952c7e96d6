//! Writes of a collection with a [`BackingStore`](crate::state::BackingStore): durable first, then in memory,
//! with the writes that arrive meanwhile batched into the next store call.
//!
//! One writer at a time is the leader. It takes every waiting write, checks
//! each against the stored resources plus the batch's earlier writes, hands
//! the batch to the store in one call (so one commit can hold it), and once
//! the store returns, applies the batch in order and publishes its events.
//! Then it wakes the others: those whose write is done return, and one whose
//! write still waits becomes the next leader.
//!
//! Invariants:
//!
//! - Memory changes only after the store has made the write durable, and only
//!   the leader changes it, so what the leader checked still holds when it applies.
//! - The history is in batch order, which is the order the store wrote.
//! - A batch the store refuses changes nothing; it is retried one write at a
//!   time, so a write the store cannot take (a spec it cannot encode) fails
//!   alone and the others are unaffected.

use std::collections::HashMap;

use parking_lot::{Condvar, Mutex, MutexGuard};

use super::{Collection, check_create, check_destroy, check_update};
use crate::resource::{DynamicResource, Pointer};
use crate::state::memory::StoreWrite;
use crate::state::{DestroyOptions, Error, Result, UpdateOptions};

/// A write waiting for its batch.
pub(in crate::state::memory) enum Write {
    /// A create, already given its version, owner and timestamps.
    Create(DynamicResource),
    Update(DynamicResource, UpdateOptions),
    Destroy(Pointer, DestroyOptions),
}

impl Write {
    fn id(&self) -> &str {
        match self {
            Write::Create(resource) | Write::Update(resource, _) => resource.id(),
            Write::Destroy(pointer, _) => pointer.id(),
        }
    }
}

/// What a write stores once its batch is durable: `Some` resource for a put, `None` for a destroy.
pub(in crate::state::memory) type Outcome = Result<Option<DynamicResource>>;

#[derive(Default)]
pub(in crate::state::memory) struct Combiner {
    state: Mutex<Waiting>,
    /// Woken when a batch is done.
    done: Condvar,
}

#[derive(Default)]
struct Waiting {
    queue: Vec<(u64, Write)>,
    next_ticket: u64,
    /// Whether a leader is at work.
    busy: bool,
    /// Outcomes of finished writes, until their writers collect them.
    outcomes: HashMap<u64, Outcome>,
}

impl Combiner {
    /// Whether no write waits and no batch is at work.
    pub(in crate::state::memory) fn is_idle(&self) -> bool {
        let waiting = self.state.lock();
        waiting.queue.is_empty() && !waiting.busy
    }
}

impl Collection {
    /// Queues `write` for the next batch; returns its ticket for [`wait`](Collection::wait).
    ///
    /// Called with the state's map locked: from here until its batch is
    /// applied, the write keeps the collection from being freed.
    pub(in crate::state::memory) fn enqueue(&self, write: Write) -> u64 {
        let mut waiting = self.combiner.state.lock();
        let ticket = waiting.next_ticket;
        waiting.next_ticket += 1;
        waiting.queue.push((ticket, write));
        ticket
    }

    /// Runs the write of `ticket` through the store, in a batch with whatever
    /// else waits, and returns what it stored.
    pub(in crate::state::memory) fn wait(&self, ticket: u64) -> Outcome {
        let mut waiting = self.combiner.state.lock();
        loop {
            if let Some(outcome) = waiting.outcomes.remove(&ticket) {
                return outcome;
            }
            if waiting.busy {
                self.combiner.done.wait(&mut waiting);
                continue;
            }
            waiting.busy = true;
            let batch = std::mem::take(&mut waiting.queue);
            let tickets: Vec<u64> = batch.iter().map(|(ticket, _)| *ticket).collect();
            // A panic in the store must fail this batch, not leave its writers
            // (and every later writer of the collection) waiting for a leader.
            let outcomes = MutexGuard::unlocked(&mut waiting, || {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.commit_batch(batch)))
            });
            match outcomes {
                Ok(outcomes) => waiting.outcomes.extend(outcomes),
                Err(_) => {
                    let failed = Error::backend(std::io::Error::other("the backing store panicked during this write"));
                    waiting.outcomes.extend(tickets.into_iter().map(|ticket| (ticket, Err(failed.clone()))));
                }
            }
            waiting.busy = false;
            self.combiner.done.notify_all();
        }
    }

    fn commit_batch(&self, batch: Vec<(u64, Write)>) -> Vec<(u64, Outcome)> {
        let mut outcomes = Vec::with_capacity(batch.len());
        let planned = self.check_batch(&batch, &mut outcomes);
        if planned.is_empty() {
            return outcomes;
        }
        let Some(store) = &self.store else {
            unreachable!("only a collection with a store writes through");
        };
        let writes: Vec<StoreWrite<'_>> = planned
            .iter()
            .map(|(_, planned)| match planned {
                Planned::Create(resource) | Planned::Update(resource) => StoreWrite::Put(resource),
                Planned::Destroy(pointer) => StoreWrite::Destroy(pointer),
            })
            .collect();
        match store.write(&writes) {
            Ok(()) => {
                drop(writes);
                let mut inner = self.inner.lock();
                for (ticket, planned) in planned {
                    let outcome = match planned {
                        Planned::Create(resource) => self.apply_create(&mut inner, resource).map(Some),
                        Planned::Update(resource) => Ok(Some(self.apply_update(&mut inner, resource, None))),
                        Planned::Destroy(pointer) => {
                            self.apply_destroy(&mut inner, &pointer);
                            Ok(None)
                        }
                    };
                    outcomes.push((ticket, outcome));
                }
                outcomes
            }
            Err(err) if planned.len() == 1 => {
                outcomes.extend(planned.into_iter().map(|(ticket, _)| (ticket, Err(err.clone()))));
                outcomes
            }
            // Find out which write the store refused: each alone, checked again.
            Err(_) => batch.into_iter().flat_map(|write| self.commit_batch(vec![write])).collect(),
        }
    }

    /// Checks each write against the resources plus the writes before it in
    /// the batch; failures go to `outcomes`, the rest are returned in order.
    fn check_batch(&self, batch: &[(u64, Write)], outcomes: &mut Vec<(u64, Outcome)>) -> Vec<(u64, Planned)> {
        let inner = self.inner.lock();
        let mut room = inner.resources.room();
        let mut planned = Vec::with_capacity(batch.len());
        // What the batch's earlier writes leave under an ID: `None` once destroyed.
        let mut overlay: HashMap<&str, Option<DynamicResource>> = HashMap::new();
        for (ticket, write) in batch {
            let id = write.id();
            let current = match overlay.get(id) {
                Some(entry) => entry.as_ref(),
                None => inner.resources.get(id),
            };
            let checked = match write {
                Write::Create(resource) => check_create(current, resource, room).map(|()| {
                    room -= 1;
                    Planned::Create(resource.clone())
                }),
                Write::Update(resource, options) => {
                    // A copy: the batch keeps the write as it came, to try
                    // each write alone if the store refuses the batch.
                    let mut resource = resource.clone();
                    check_update(current, resource.metadata_mut(), options).map(|()| Planned::Update(resource))
                }
                Write::Destroy(pointer, options) => {
                    check_destroy(current, pointer, options).map(|()| Planned::Destroy(pointer.clone()))
                }
            };
            match checked {
                Ok(checked) => {
                    let after = match &checked {
                        Planned::Create(resource) | Planned::Update(resource) => Some(resource.clone()),
                        Planned::Destroy(_) => None,
                    };
                    overlay.insert(id, after);
                    planned.push((*ticket, checked));
                }
                Err(err) => outcomes.push((*ticket, Err(err))),
            }
        }
        planned
    }
}

/// A write that passed its checks.
enum Planned {
    Create(DynamicResource),
    Update(DynamicResource),
    Destroy(Pointer),
}
