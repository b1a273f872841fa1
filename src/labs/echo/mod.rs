//! The echo lab: io_uring vs epoll echo servers, a load generator, and the cost model.

pub mod model;
