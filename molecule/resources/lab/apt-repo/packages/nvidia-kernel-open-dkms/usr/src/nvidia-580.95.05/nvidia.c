// SPDX-License-Identifier: GPL-2.0
/*
 * Lab stand-in for NVIDIA's open GPU kernel module: it drives no device and only announces
 * itself as the real one does, so that /sys/module/nvidia exists while it is loaded and the
 * lab's nvidia-smi answers only then.
 */
#include <linux/init.h>
#include <linux/module.h>

static int __init nvidia_lab_init(void)
{
	pr_info("NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  (inferops lab stand-in)\n");
	return 0;
}

static void __exit nvidia_lab_exit(void)
{
	pr_info("NVRM: unloading NVIDIA UNIX Open Kernel Module (inferops lab stand-in)\n");
}

module_init(nvidia_lab_init);
module_exit(nvidia_lab_exit);

MODULE_LICENSE("Dual MIT/GPL");
MODULE_VERSION("580.95.05");
MODULE_DESCRIPTION("inferops lab stand-in for the NVIDIA open GPU kernel module");
