package membership

import (
	"sync"
)

// Event kinds.
const (
	EventJoin   = "join"   // member became alive (first seen, or back after dead/left)
	EventLeave  = "leave"  // member is dead or left; see Event.Graceful
	EventUpdate = "update" // member's metadata (role) changed
)

// Member states.
const (
	StateAlive = "alive"
	// StateSuspect exists for completeness. memberlist v0.5.4 does not
	// expose suspicion to delegates, so Members never reports it: a member
	// stays "alive" until it is declared "dead".
	StateSuspect = "suspect"
	StateDead    = "dead"
	StateLeft    = "left"
)

// Member is one node as seen by the local pool.
type Member struct {
	Name  string
	Role  Role // empty if the member's metadata could not be read
	Addr  string
	State string // StateAlive, StateDead or StateLeft
}

// Event reports a membership change observed by the local pool.
type Event struct {
	Member Member
	Kind   string // EventJoin, EventLeave or EventUpdate
	// Graceful is true for a leave the member announced itself (State
	// "left"); false for a member declared dead by its peers. Best effort,
	// see Pool.Leave.
	Graceful bool
}

// eventOutBuffer is the capacity of the channel returned by Events.
const eventOutBuffer = 64

// eventQueue decouples memberlist's delegate from the consumer.
//
// Choice: an unbounded FIFO drained by one goroutine. push never blocks (the
// delegate runs under memberlist's node lock) and no event is ever dropped,
// so a consumer never misses a "died" or "came back". Memory grows only with
// membership churn the consumer has not read yet; Members is the snapshot to
// resync from.
type eventQueue struct {
	mu      sync.Mutex
	items   []Event
	closed  bool
	wake    chan struct{} // capacity 1: "items is not empty"
	stop    chan struct{}
	done    chan struct{}
	out     chan Event
	stopped sync.Once
}

func newEventQueue() *eventQueue {
	q := &eventQueue{
		wake: make(chan struct{}, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
		out:  make(chan Event, eventOutBuffer),
	}
	go q.run()
	return q
}

// push appends ev; it never blocks. Events after close are dropped.
func (q *eventQueue) push(ev Event) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	q.items = append(q.items, ev)
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// run forwards queued events to out until close; it then closes out.
func (q *eventQueue) run() {
	defer close(q.done)
	defer close(q.out)
	for {
		select {
		case <-q.stop:
			return
		case <-q.wake:
		}
		for {
			q.mu.Lock()
			if len(q.items) == 0 {
				q.items = nil // release the backing array after a burst
				q.mu.Unlock()
				break
			}
			ev := q.items[0]
			q.items[0] = Event{}
			q.items = q.items[1:]
			q.mu.Unlock()

			select {
			case q.out <- ev:
			case <-q.stop:
				return
			}
		}
	}
}

// close stops the forwarder, drops undelivered events and closes out.
// It is idempotent and waits for the forwarder to exit.
func (q *eventQueue) close() {
	q.stopped.Do(func() {
		q.mu.Lock()
		q.closed = true
		q.items = nil
		q.mu.Unlock()
		close(q.stop)
	})
	<-q.done
}
