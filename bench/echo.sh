#!/bin/sh
# The echo lab's "must show" figures (issue 3), side by side in one run each.
# Run on a quiet machine: every figure is printed with its min-max over the repetitions.
set -eu
B=${COSTLAB:-target/release/costlab}

# io_uring vs epoll vs the basic io_uring server at 128 and 1000 connections, 16-byte
# messages; the ratio table gives uring/epoll and uring/uring-basic per point.
"$B" echo --conns 128,1000 --sizes 16 --duration 3s --samples 5

# The event-driven loader against the thread-per-connection blocking one, same server,
# 128 connections; the ratio table's last column is event/blocking.
"$B" echo --case uring,epoll --client event,blocking --conns 128 --duration 3s --samples 5

# The whole sweep, as `costlab echo` runs it by default.
"$B" echo --json echo.json
