#[switchman_macros::interface("org.example.Demo")]
trait Demo {
    async fn add(&self, a: i32, b: i32) -> i32;
    async fn ping(&self);
}

fn main() {}
