// The DPDK headers the capture plane uses, in one place: DPDK 22.11 headers trip -Wvolatile and
// -Wshadow under C++20, and they are not our code, so the warnings are off around them only.
#pragma once

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wvolatile"
#pragma GCC diagnostic ignored "-Wshadow"
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>
#include <rte_pause.h>
#pragma GCC diagnostic pop
