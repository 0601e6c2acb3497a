//go:build !linux

package launcher

import "syscall"

func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
