package scanner

import (
	"container/heap"
	"time"
)

// check is a published row to look up again at a given time.
type check struct {
	id          int64
	publishedAt time.Time // the publication it belongs to; a later one makes it stale
	at          time.Time
}

// checkQueue orders checks by time. Rows are pushed in publication order,
// so it is nearly sorted; a heap keeps it correct when it is not.
type checkQueue struct{ h checkHeap }

func (q *checkQueue) Len() int     { return len(q.h) }
func (q *checkQueue) peek() check  { return q.h[0] }
func (q *checkQueue) push(c check) { heap.Push(&q.h, c) }
func (q *checkQueue) pop() check   { return heap.Pop(&q.h).(check) }

type checkHeap []check

func (h checkHeap) Len() int           { return len(h) }
func (h checkHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h checkHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *checkHeap) Push(x any)        { *h = append(*h, x.(check)) }
func (h *checkHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}
