//! costlab's history and what reads it: statistics over runs (`analysis`), the store
//! (`store`: SQLite and PostgreSQL behind one trait, and the storage policy), and what shows a
//! run (`report`: tables, exports, the cost sheet, the HTML page). It knows no lab.

pub mod analysis;
pub mod report;
pub mod store;
