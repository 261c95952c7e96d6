//! The 30-second taste of COSI: an in-memory state, a runtime, one controller
//! that turns integers into strings, and writes that make it work.
//!
//! Run it with `cargo run --example quickstart`.

#![forbid(unsafe_code)]

use cosi::prelude::*;

/// A number someone wants spelled out (an input).
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Numbers.example.org", namespace = "default")]
pub struct Number {
    pub value: i64,
}

/// The number, spelled out (an output, written by exactly one controller).
#[derive(Resource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[resource(type = "Words.example.org", namespace = "default")]
pub struct Word {
    pub text: String,
}

/// Its declaration is its contract: it reads numbers (and holds them with a
/// finalizer until their word is gone), and is the one writer of words.
#[controller(inputs = [Strong<Number>, DestroyReady<Word>], outputs = [Exclusive<Word>])]
async fn int_to_str(ctx: &mut Ctx) -> cosi::Result<()> {
    for number in ctx.list::<Number>(&ListOptions::default()).await? {
        match number.metadata().phase() {
            Phase::Running => {
                if !number.metadata().finalizers().has(ctx.name()) {
                    ctx.add_finalizers(&number, &[ctx.name()]).await?;
                }
                let word = ctx.modify::<Word>(number.id(), |word| word.text = spell(number.value)).await?;
                println!("  int_to_str: {} -> {:?} (version {})", number.id(), word.text, word.metadata().version());
            }
            // The number is going away: remove its word first, then let it go.
            Phase::TearingDown if number.metadata().finalizers().has(ctx.name()) => {
                if ctx.teardown::<Word>(number.id()).await.unwrap_or(true) {
                    let _ = ctx.destroy::<Word>(number.id()).await;
                    ctx.remove_finalizers(&number, &[ctx.name()]).await?;
                    println!("  int_to_str: {} released", number.id());
                }
            }
            Phase::TearingDown => (),
        }
    }
    Ok(())
}

fn spell(value: i64) -> String {
    const DIGITS: [&str; 10] = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"];
    let digits = value.unsigned_abs().to_string();
    let words: Vec<&str> = digits.bytes().map(|digit| DIGITS[usize::from(digit - b'0')]).collect();
    match value < 0 {
        true => format!("minus {}", words.join(" ")),
        false => words.join(" "),
    }
}

#[tokio::main]
async fn main() -> cosi::Result<()> {
    let state = cosi::state::memory();

    // Every #[controller] linked into the program, checked as a graph before anything runs.
    let runtime = Runtime::from_inventory(state.clone())?;
    println!("the graph:\n{}", runtime.graph().to_mermaid());
    runtime.start()?;

    println!("create number 42");
    state.create(Typed::new("answer", Number { value: 42 }), CreateOptions::default()).await?;
    // Until every controller has caught up with that write (and with its own writes).
    runtime.settled().await;
    let word = state.get::<Word>("answer").await?;
    println!("word {:?} is owned by {:?}", word.text, word.metadata().owner().unwrap_or_default());

    println!("update number 42 -> 7");
    state.modify::<Number>("answer", UpdateOptions::default(), |number| number.value = 7).await?;
    runtime.settled().await;
    println!("word is now {:?}", state.get::<Word>("answer").await?.text);

    // Only the controller may write words: the state refuses anyone else.
    let mut word = state.get::<Word>("answer").await?;
    word.text = "hijacked".into();
    println!("a foreign write fails: {}", state.update(word, UpdateOptions::default()).await.unwrap_err());

    println!("tear down number 7");
    let ready = state.teardown::<Number>("answer", TeardownOptions::default()).await?;
    println!("ready to destroy at once: {ready} (the controller holds a finalizer)");
    // The controller removes the word, then its finalizer.
    runtime.settled().await;
    state.destroy::<Number>("answer", DestroyOptions::default()).await?;
    println!("destroyed; words left: {}", state.list::<Word>(&ListOptions::default()).await?.len());

    let stats = runtime.stats("int_to_str").unwrap_or_default();
    println!("int_to_str reconciled {} times, {} errors", stats.reconciles, stats.errors);
    runtime.shutdown().await;
    Ok(())
}
