MemcpyHtoD,0x00007f3a5c000000,2000
MemcpyHtoD,0x00007f3a5c000800,2000
kernel-1.traceg
kernel-2.traceg
