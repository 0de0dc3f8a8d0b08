pub mod analyze;
pub mod convert;
pub mod generate;
pub mod inspect;
pub mod order_eval;
pub mod prepare;
pub mod train;
pub mod verify_plan;
