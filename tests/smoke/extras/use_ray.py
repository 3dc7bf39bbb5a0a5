"""imp[ray]: imp.ray.map over two rows on a local Ray cluster started here."""

import anyio
import ray

import imp


def answer(messages: list[dict[str, str]], options: object) -> str:
    question = messages[-1]["content"].split("[[ ## question ## ]]\n", 1)[1].split("\n", 1)[0]
    return f"[[ ## answer ## ]]\n{question.upper()}\n\n[[ ## completed ## ]]"


def model() -> imp.LM:
    return imp.StaticLM(answer)


program = imp.predict("question -> answer", lm=model())
ray.init(num_cpus=1, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
try:

    async def main() -> list[str]:
        predictions = await imp.ray.map(program, [{"question": "d"}, {"question": "e"}], lm_factory=model, num_cpus=0.5)
        return [p.answer for p in predictions]

    assert anyio.run(main) == ["D", "E"]
finally:
    ray.shutdown()
print("ok")
