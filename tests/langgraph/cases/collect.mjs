// A run's stream as [{event, data}], in order (the helper the cases share).
export default async function collect(stream) {
    const out = [];
    for await (const part of stream) out.push({ event: part.event, data: part.data });
    return out;
}
