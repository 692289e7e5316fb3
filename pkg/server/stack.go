package server

// growStack grows the calling goroutine's stack to hold 8 KiB more, in one copy.
// HTTP/2 runs each request on a new goroutine whose first stack the runtime sizes
// by the average of all goroutines, and a coordinator's are mostly small parked
// ones (a connection's reader, a waiting blocking query): a handler then grew its
// stack by doubling, again and again, each copy walking every frame below it. At
// 1000 hosts the copies were 170–320 ms of the leader's ~4 s in a first apply;
// one growth at the handler's top, with few frames to move, brings them to
// 130–210 ms. The frame is declared in assembly (stack.s) so that taking it costs
// the stack check and nothing more: a Go array that size is zeroed on every call.
func growStack()
