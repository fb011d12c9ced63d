//go:build linux && amd64

#include "textflag.h"

// func outl(port uint16, val uint32)
TEXT ·outl(SB), NOSPLIT, $0-8
	MOVW port+0(FP), DX
	MOVL val+4(FP), AX
	BYTE $0xef // OUTL: out %eax, (%dx)
	RET
