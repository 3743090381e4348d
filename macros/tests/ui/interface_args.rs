#[switchman_macros::interface("org.example.Demo", versoin = "1.0.0")]
trait Demo {
    async fn add(&self, a: i32, b: i32) -> Result<i32, String>;
}

fn main() {}
