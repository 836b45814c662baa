package sqlite

import "sync"

// batcher hands queued items, in queue order, to write in groups: one
// goroutine takes everything queued so far, writes it in one go, and takes
// what was queued meanwhile. Under load the groups grow by themselves; alone,
// an item is written at once.
type batcher[T any] struct {
	write func([]T)

	mu      sync.Mutex
	queue   []T
	stopped bool
	wake    chan struct{}
	done    chan struct{}
}

// maxGroup bounds one write; the rest waits for the next.
const maxGroup = 4096

func newBatcher[T any](write func([]T)) *batcher[T] {
	b := &batcher[T]{write: write, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go b.run()
	return b
}

// add queues item; false after close (item will never be written).
func (b *batcher[T]) add(item T) bool {
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return false
	}
	b.queue = append(b.queue, item)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	return true
}

func (b *batcher[T]) run() {
	defer close(b.done)
	var group []T
	for {
		b.mu.Lock()
		n := min(len(b.queue), maxGroup)
		group = append(group[:0], b.queue[:n]...)
		rest := copy(b.queue, b.queue[n:])
		clear(b.queue[rest:])
		b.queue = b.queue[:rest]
		stopped := b.stopped
		b.mu.Unlock()
		if len(group) > 0 {
			b.write(group)
			clear(group)
			continue
		}
		if stopped {
			return
		}
		<-b.wake
	}
}

// close writes what is queued, refuses more and returns once written.
func (b *batcher[T]) close() {
	b.mu.Lock()
	b.stopped = true
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	<-b.done
}
