#[switchman_macros::interface("org.example.Demo")]
trait Demo {
    #[java(name = "plus", timeuot = 500)]
    async fn add(&self, a: i32, b: i32) -> Result<i32, String>;
}

fn main() {}
