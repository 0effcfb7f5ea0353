// Pins: a tonic service method (`Result<Response<M>, Status>`, recognised
// by those names) does not take `reconcile = …`: the error is at the
// option, before any type is checked (so no tonic here).
use async_trait::async_trait;
use idem::idempotent;

struct Response<T>(T);
struct Status;
struct Reply;

#[async_trait]
trait Payments {
    async fn charge(&self, order: String) -> Result<Response<Reply>, Status>;
}

struct Service;

async fn was_charged(_: &Service, _: &String) -> Result<Option<()>, Status> {
    Ok(None)
}

#[async_trait]
impl Payments for Service {
    #[idempotent(key = order, reconcile = was_charged)]
    async fn charge(&self, order: String) -> Result<Response<Reply>, Status> {
        let _ = order;
        Ok(Response(Reply))
    }
}

fn main() {}
