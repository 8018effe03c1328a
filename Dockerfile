# numbert serve in a container (docs/serving.md):
#   docker build -t numbert-serve .
#   docker run -p 8000:8000 -v /srv/models/all-MiniLM-L6-v2:/model:ro numbert-serve
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    OPENBLAS_THREAD_TIMEOUT=4 \
    HF_HUB_OFFLINE=1

# numbert from this source tree, with the server's extra (Starlette, uvicorn); add ",otel" for --otlp-endpoint
COPY pyproject.toml README.md LICENSE /src/
COPY numbert /src/numbert
RUN pip install --no-cache-dir "numbert[serve] @ file:///src" \
    && rm -rf /src \
    && groupadd --system --gid 10001 numbert \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin numbert

# the model directory (config.json, model.safetensors, vocab.txt, ...) is mounted here, read-only
VOLUME ["/model"]
USER 10001:10001
EXPOSE 8000

HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=4)"]

# flags after the image name replace CMD: docker run ... numbert-serve --model /model --workers 2
ENTRYPOINT ["numbert", "serve", "--host", "0.0.0.0", "--port", "8000", "--log-format", "json"]
CMD ["--model", "/model"]
