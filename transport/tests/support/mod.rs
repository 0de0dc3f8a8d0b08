pub mod overload;
