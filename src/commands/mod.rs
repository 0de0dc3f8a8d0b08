pub mod analyze;
pub mod convert;
pub mod generate;
pub mod inspect;
pub mod prepare;
pub mod verify_plan;
