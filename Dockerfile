# layoutsat service image: Debian's Python in a virtual environment, non-root, no build tools.
FROM debian:bookworm-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
 && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/layoutsat
WORKDIR /src
COPY pyproject.toml README.md ./
COPY models ./models
COPY solver ./solver
COPY app ./app
RUN /opt/layoutsat/bin/pip install --no-cache-dir --disable-pip-version-check '.[import]' \
 && find /opt/layoutsat -name '__pycache__' -prune -exec rm -rf {} + \
 && rm -rf /opt/layoutsat/lib/python3*/site-packages/pip /opt/layoutsat/lib/python3*/site-packages/pip-*

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --create-home --uid 10001 layoutsat \
 && mkdir /data && chown layoutsat /data
COPY --from=build /opt/layoutsat /opt/layoutsat
ENV PATH=/opt/layoutsat/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MPLCONFIGDIR=/tmp/matplotlib \
    LAYOUTSAT_HOST=0.0.0.0 \
    LAYOUTSAT_PORT=8000 \
    LAYOUTSAT_DATA_DIR=/data
# Jobs, cached results and compare outputs (docs/service.md lists every setting).
VOLUME /data
USER layoutsat
WORKDIR /home/layoutsat
EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=5s --start-period=10s --retries=3 \
  CMD python3 -c "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('LAYOUTSAT_PORT', '8000'), timeout=4)" || exit 1
CMD ["sh", "-c", "exec layoutsat serve --host \"$LAYOUTSAT_HOST\" --port \"$LAYOUTSAT_PORT\""]
