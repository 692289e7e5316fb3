// growStack (stack.go): an 8 KiB frame, never touched; the prologue the
// assembler adds grows the stack to fit it.
TEXT ·growStack(SB), 0, $8192-0
	RET
