#[switchman_macros::interface("org.example.Demo")]
trait Demo {
    async fn add(a: i32, b: i32) -> Result<i32, String>;
    async fn reset(&mut self) -> Result<(), String>;
}

fn main() {}
