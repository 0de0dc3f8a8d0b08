pub mod convert;
pub mod generate;
pub mod inspect;
