"""imp[fastapi]: an imp program behind a FastAPI route, called through httpx's ASGI transport, and uvicorn there."""

import anyio
import httpx
import uvicorn  # noqa: F401  (the extra brings the server too)
from fastapi import FastAPI

import imp

agent = imp.predict("question -> answer", lm=imp.ScriptedLM([{"answer": "Paris"}]))
app = FastAPI()


@app.get("/ask")
async def ask(question: str) -> dict[str, str]:
    with imp.deadline(5):
        prediction = await imp.call(agent, question=question)
    return {"answer": prediction.answer}


async def main() -> None:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
        response = await client.get("/ask", params={"question": "Capital of France?"})
    assert response.json() == {"answer": "Paris"}, response.text


anyio.run(main)
print("ok")
